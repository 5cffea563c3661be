"""A plugin that records that it was imported; tests block it and check it never was."""

import os

os.environ["ORTPLUG_TEST_FAKE_IMPORTED"] = "1"

from ortplug import hookimpl


@hookimpl
def ortplug_doctor_checks():
    return []
