"""First of two distributions that claim the entry-point name dup."""

from ortplug import hookimpl


@hookimpl
def ortplug_doctor_checks():
    return []
