"""attnscope-cli scan at scale: a generated dump of 2000 small cases (every 100th holds a NaN in v)
scanned in parallel, streamed in case order, the same report at --threads 1 and 2, and a
progress line only when stderr is a terminal. cli_many_cases_dump_generated writes the dump
(CTest fixture many_cases), which the SIGINT tests read as well."""
import os
import pty
import subprocess
import threading
import unittest

import h5py
import numpy as np

from cli_support import CLI, MANY, CliTestCase, run_cli


def write_many_cases(out, count):
    """Cases /many/case_00000 .. : q, k, v, do of shape [1, 2, 8, 8] in float16, step = the case
    number; every 100th case holds one NaN in v (nonfinite_input, an error), the others are
    healthy. Written to a temporary first, so a reader never sees half a file."""
    rng = np.random.default_rng(7)
    with h5py.File(out + ".tmp", "w") as f:
        for n in range(count):
            g = f.create_group(f"/many/case_{n:05d}")
            g.attrs["dtype"] = "float16"
            g.attrs["step"] = n
            for name in ("q", "k", "v", "do"):
                x = rng.standard_normal((1, 2, 8, 8)).astype(np.float16)
                if name == "v" and n % 100 == 0:
                    x[0, 1, 3, 5] = np.nan
                g.create_dataset(name, data=x)
    os.replace(out + ".tmp", out)


def drain(fd):
    """Everything written to a pty master until the slave side closes."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: every slave descriptor is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


class CliManyCasesTest(CliTestCase):
    def test_cli_many_cases_dump_generated(self):
        write_many_cases(MANY, 2000)

    def test_cli_scan_2000_cases_json_complete_in_case_order(self):
        doc = self.cli_json("scan", "--json", MANY, "--threads", "2", exit=1)
        cases = doc["cases"]
        self.assertEqual([c["path"] for c in cases], [f"/many/case_{n:05d}" for n in range(2000)])
        self.assertEqual(doc["cases_total"], 2000)
        self.assertIs(doc["interrupted"], False)
        self.assertEqual([n for n, c in enumerate(cases) if c["findings"]],
                         list(range(0, 2000, 100)))
        self.assertEqual([(c["path"], c["findings"][0]["kind"], c["findings"][0]["head"])
                          for c in cases if c["findings"]
                          and (c["findings"][0]["kind"], c["findings"][0]["head"])
                          != ("nonfinite_input", 1)], [])

    def test_cli_scan_2000_cases_same_report_threads_1_and_2(self):
        one, two = (run_cli("scan", "--json", MANY, "--threads", threads, timeout=600)
                    for threads in (1, 2))
        self.assertEqual(one.returncode, two.returncode, "exit codes of --threads 1 and 2")
        first, second = self.json_of(one), self.json_of(two)
        for doc in (first, second):
            doc.pop("seconds", None)
        self.assertEqual([c["path"] for c in first["cases"]], [c["path"] for c in second["cases"]],
                         "case order")
        for a, b in zip(first["cases"], second["cases"]):
            self.assertEqual(a, b, a["path"])
        self.assertEqual({k: v for k, v in first.items() if k != "cases"},
                         {k: v for k, v in second.items() if k != "cases"})

    def test_cli_scan_2000_cases_table_summary(self):
        run = self.cli("scan", MANY, "--mode", "fused", exit=1)
        self.assertInStdout(run, "many_cases.h5: 2000 cases\n", "2000 cases scanned",
                            ": 80 errors, 20 warnings, 0 info")

    # stderr on a pseudo-terminal: a "scan: N/M cases" line is shown there and cleared at the end.
    def test_cli_scan_progress_line_only_on_a_terminal(self):
        master, slave = pty.openpty()
        command = [CLI, "scan", "--json", MANY, "--threads", "2"]
        tty = []
        reader = threading.Thread(target=lambda: tty.append(drain(master)))
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave, text=True) as proc:
            os.close(slave)
            reader.start()
            out = proc.stdout.read()
            proc.wait(timeout=300)
        reader.join()
        run = subprocess.CompletedProcess(command, proc.returncode, out, tty[0])
        self.assertEqual(run.returncode, 1, "exit code" + self.context(run))
        self.assertGreater(len(self.json_of(run)["cases"]), 0)
        self.assertTrue("\rscan: " in run.stderr and " cases" in run.stderr
                        and run.stderr.endswith("\r\x1b[K"),
                        "no progress line on the terminal, or not cleared" + self.context(run))


if __name__ == "__main__":
    unittest.main()
