"""run_probe_script: a child interpreter's answer, or an error fact when it misbehaves."""

from __future__ import annotations

import textwrap

from ortplug.host.probing import run_probe_script


def _script(tmp_path, body: str):
    path = tmp_path / "probe.py"
    path.write_text("import json, os, sys, time\n" + textwrap.dedent(body))
    return path


def test_the_last_json_line_is_the_answer(tmp_path) -> None:
    script = _script(
        tmp_path,
        """
        print("library chatter")
        print(json.dumps({"echo": json.loads(sys.argv[1]), "isolated": sys.flags.isolated}))
    """,
    )
    assert run_probe_script(script, {"n": 3}) == {"echo": {"n": 3}, "isolated": 1}


def test_a_hanging_probe_times_out(tmp_path) -> None:
    script = _script(tmp_path, "time.sleep(30)\n")
    assert run_probe_script(script, {}, timeout=0.5) == {
        "error": "probe.py did not answer within 0.5 s"
    }


def test_a_crashing_probe_is_reported_with_its_signal(tmp_path) -> None:
    script = _script(tmp_path, "os.abort()\n")
    assert run_probe_script(script, {}) == {"error": "probe.py crashed (SIGABRT)"}


def test_a_failing_probe_reports_its_last_error_line(tmp_path) -> None:
    script = _script(tmp_path, "raise OSError('libfoo.so: cannot open shared object file')\n")
    answer = run_probe_script(script, {})
    assert answer == {
        "error": "probe.py exited with status 1: OSError: libfoo.so: cannot open shared object file"
    }


def test_non_json_and_non_object_answers_are_errors(tmp_path) -> None:
    assert (
        "printed no JSON answer"
        in run_probe_script(_script(tmp_path, "print('hello')\n"), {})["error"]
    )
    assert run_probe_script(_script(tmp_path, "print('[1, 2]')\n"), {}) == {
        "error": "probe.py answered list, expected an object"
    }
