"""Shared plumbing of the attnscope-cli tests: the executable, the bundled sample and the scratch
folder (environment set by tests/cli/CMakeLists.txt), a TestCase that runs the CLI and checks its
exit code and output, and the scan-JSON helpers by_path / kinds_of."""
import json
import os
import shutil
import subprocess
import unittest

CLI = os.environ["ATTNSCOPE_CLI"]
SAMPLE = os.environ["ATTNSCOPE_SAMPLE"]
DATA = os.environ["ATTNSCOPE_CLI_DATA"]
# The 2000-case dump of test_cli_many_cases (CTest fixture many_cases).
MANY = os.path.join(DATA, "many_cases.h5")

HERE = os.path.dirname(os.path.abspath(__file__))
# A committed file whose chunk of /case/q does not inflate, and a probe that refuses every file.
BAD_DATA = os.path.normpath(os.path.join(HERE, "..", "data", "bad", "garbage_deflate_chunk.h5"))
REFUSING_PROBE = os.path.join(HERE, "refusing_probe.sh")


def by_path(doc):
    """The cases of an info / scan JSON document keyed by their path."""
    return {c["path"]: c for c in doc["cases"]}


def kinds_of(case):
    """The distinct finding kinds of one scanned case, sorted."""
    return sorted({f["kind"] for f in case["findings"]})


def run_cli(*args, env=None, timeout=300, under=()):
    """attnscope-cli ARGS run to the end, its output captured (a CompletedProcess); `under` is a
    command line it runs under (an emulator)."""
    return subprocess.run([*under, CLI, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


class CliTestCase(unittest.TestCase):
    """Runs attnscope-cli; every failure shows the command and the tails of its output."""

    maxDiff = 10_000

    def cli(self, *args, exit, env=None, timeout=300, under=()):
        """Runs attnscope-cli ARGS and checks that it exits with `exit`; the CompletedProcess."""
        run = run_cli(*args, env=env, timeout=timeout, under=under)
        self.assertEqual(run.returncode, exit, "exit code" + self.context(run))
        return run

    def cli_json(self, *args, exit, env=None, timeout=300):
        """The JSON document attnscope-cli ARGS prints, its exit code checked as in cli()."""
        return self.json_of(self.cli(*args, exit=exit, env=env, timeout=timeout))

    def json_of(self, run):
        try:
            return json.loads(run.stdout)
        except json.JSONDecodeError as error:
            self.fail(f"stdout is not JSON ({error})" + self.context(run))

    def assertInStdout(self, run, *texts):
        for text in texts:
            if text not in run.stdout:
                self.fail(f"stdout lacks {text!r}" + self.context(run))

    def assertInStderr(self, run, *texts):
        for text in texts:
            if text not in run.stderr:
                self.fail(f"stderr lacks {text!r}" + self.context(run))

    def assertStartsWith(self, text, prefix):
        if not text.startswith(prefix):
            self.fail(f"{text!r} does not start with {prefix!r}")

    def context(self, run):
        """The command of a CompletedProcess and the tails of its output, for a failure message."""
        return (f"\ncommand: {' '.join(map(str, run.args))}\nstdout (tail):\n{run.stdout[-3000:]}"
                f"\nstderr (tail):\n{run.stderr[-3000:]}")

    def scratch(self):
        """An empty folder of this test's own in the data folder, left in place for a look after
        a failure."""
        path = os.path.join(DATA, self.id().rsplit(".", 1)[-1])
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path
