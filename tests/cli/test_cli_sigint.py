"""SIGINT to a running attnscope-cli: scan, run and sweep stop cleanly with exit 130 (the cases
so far as a complete JSON document or table, no output file or temporary left, nothing printed
by sweep), and a case whose analysis takes seconds stops inside its kernels. The signal is sent
only once the handler is installed (SigCgt in /proc/PID/status)."""
import os
import signal
import subprocess
import tempfile
import time
import unittest

import h5py
import numpy as np

from cli_support import CLI, MANY, SAMPLE, CliTestCase


def handler_installed(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False


def cpu_seconds(pid):
    """User + system CPU time a process has used so far (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_big_case(path):
    """One fp16 case /big of [1, 2, 8192, 64], whose analysis takes about 5 CPU-seconds on a
    2026 AVX-512 CPU, its first kernel run done after about 0.4."""
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        g = f.create_group("/big")
        g.attrs["dtype"] = "float16"
        for name in ("q", "k", "v", "do"):
            g.create_dataset(name, data=rng.standard_normal((1, 2, 8192, 64)).astype(np.float16))


def stop(proc):
    proc.kill()
    proc.wait()
    proc.stdout.close()
    proc.err_file.close()


class CliSigintTest(CliTestCase):
    def start(self, *args):
        """attnscope-cli ARGS started with stdout piped and stderr in a file (mixing a pipe with
        the line reads of stdout could lose buffered data); killed when the test ends."""
        err = tempfile.TemporaryFile("w+")
        proc = subprocess.Popen([CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=err,
                                text=True)
        proc.err_file = err
        self.addCleanup(stop, proc)
        return proc

    def wait_for(self, proc, done, what, limit_s):
        """Polls done() every 10 ms; fails naming `what` if proc ends or limit_s passes first."""
        deadline = time.time() + limit_s
        while not done():
            if proc.poll() is not None or time.time() > deadline:
                self.fail(f"the process ended or stalled before {what}: {proc.returncode}")
            time.sleep(0.01)

    def wait_for_handler(self, proc):
        self.wait_for(proc, lambda: handler_installed(proc.pid), "its SIGINT handler", 120)

    def read_until(self, proc, marker):
        """stdout lines up to and including the first that contains `marker`."""
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if marker in line:
                return "".join(seen)
        self.fail(f"stdout ended before {marker!r}:\n" + "".join(seen)[-2000:])

    def finish(self, proc, head=""):
        """Waits for the end of proc: a CompletedProcess whose stdout is `head` (read already)
        and the rest."""
        rest = proc.stdout.read()
        proc.wait(timeout=300)
        proc.err_file.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, head + rest,
                                           proc.err_file.read())

    def assertExit130(self, run):
        self.assertEqual(run.returncode, 130, "exit code" + self.context(run))

    def interrupt_scan(self, *options, marker):
        """scan of the many-cases dump, SIGINT once stdout shows `marker`; (run, every path)."""
        paths = [c["path"] for c in self.cli_json("info", "--json", MANY, exit=0)["cases"]]
        proc = self.start("scan", MANY, "--threads", "2", *options)
        head = self.read_until(proc, marker)
        self.wait_for_handler(proc)
        proc.send_signal(signal.SIGINT)
        run = self.finish(proc, head)
        self.assertExit130(run)
        return run, paths

    def interrupt_run(self, signals):
        """run of the many-cases dump into an empty folder, `signals` SIGINTs in a row once a
        case is written; (run, the folder, the output path)."""
        out_dir = self.scratch()
        out_path = os.path.join(out_dir, "results.h5")
        proc = self.start("run", MANY, "--out", out_path, "--threads", "2")
        head = self.read_until(proc, "findings")
        self.wait_for_handler(proc)
        for _ in range(signals):
            proc.send_signal(signal.SIGINT)
        run = self.finish(proc, head)
        self.assertExit130(run)
        return run, out_dir, out_path

    def interrupt_big_case(self, *args):
        """attnscope-cli ARGS on the big case, SIGINT once it has used 0.6 CPU-seconds: inside
        its analysis (past its first kernel run), about a tenth of the way through it on any
        machine. The time from SIGINT to exit is printed, not checked."""
        proc = self.start(*args)
        self.wait_for_handler(proc)
        # CPU time says how far the work got, whatever the CPU's speed and however busy the
        # machine (a wall-clock sleep measures neither).
        self.wait_for(proc, lambda: cpu_seconds(proc.pid) >= 0.6, "0.6 CPU-seconds", 300)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        run = self.finish(proc)
        print(f"exit {run.returncode} {time.monotonic() - sent:.2f} s after SIGINT")
        self.assertExit130(run)
        self.assertInStderr(run, "interrupted after 0 of 1 cases")
        return run

    def test_cli_sigint_scan_json_closed_and_prefix_in_order(self):
        run, every = self.interrupt_scan("--json", marker='"path"')
        context = self.context(run)
        doc = self.json_of(run)
        paths = [c["path"] for c in doc["cases"]]
        self.assertIs(doc["interrupted"], True, context)
        self.assertEqual(doc["cases_total"], len(every), context)
        self.assertTrue(0 < len(paths) < len(every), f"{len(paths)} cases reported" + context)
        self.assertEqual(paths, every[: len(paths)], "not a prefix in file order" + context)
        self.assertNotIn("\r", run.stderr, "a progress line though stderr is no terminal")
        self.assertInStderr(run, f"interrupted after {len(paths)} of {len(every)} cases")

    def test_cli_sigint_scan_table_says_interrupted(self):
        run, every = self.interrupt_scan(marker=" B=")
        context = self.context(run)
        rows = [row.split()[0] for row in run.stdout.splitlines()
                if row.startswith("/") and " B=" in row]
        self.assertTrue(0 < len(rows) < len(every), f"{len(rows)} rows" + context)
        self.assertEqual(rows, every[: len(rows)], "not a prefix in file order" + context)
        self.assertInStdout(run, f"interrupted, {len(rows)} of {len(every)} cases scanned")
        self.assertInStderr(run, f"interrupted after {len(rows)} of {len(every)} cases")

    def test_cli_sigint_run_leaves_no_output_file(self):
        run, out_dir, out_path = self.interrupt_run(signals=1)
        self.assertEqual(sorted(os.listdir(out_dir)), [], "files left" + self.context(run))
        self.assertInStderr(run, f"{out_path} not written")

    # The second SIGINT exits at once: no visible file (a hidden ".NAME.PID-N.tmp" of the writer
    # may stay; the next writer removes it).
    def test_cli_sigint_twice_run_exits_at_once_without_temp_file(self):
        run, out_dir, _ = self.interrupt_run(signals=2)
        self.assertEqual([name for name in sorted(os.listdir(out_dir)) if not name.startswith(".")],
                         [], "files left" + self.context(run))

    def test_cli_sigint_sweep_exit_130_nothing_printed(self):
        proc = self.start("sweep", f"{SAMPLE}::/exploding_grad", "--scales", "0.001:1000:400")
        self.wait_for_handler(proc)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        run = self.finish(proc)
        self.assertExit130(run)
        self.assertEqual(run.stdout, "", "stdout" + self.context(run))
        self.assertInStderr(run, "interrupted after", "scale points")

    def test_cli_sigint_scan_one_big_case_stops_the_kernel(self):
        dump = os.path.join(self.scratch(), "big.h5")
        write_big_case(dump)
        doc = self.json_of(self.interrupt_big_case("scan", "--json", dump, "--threads", "2"))
        self.assertEqual(doc["cases"], [])
        self.assertIs(doc["interrupted"], True)
        self.assertEqual(doc["cases_total"], 1)

    def test_cli_sigint_run_one_big_case_stops_the_kernel(self):
        out_dir = self.scratch()
        dump = os.path.join(out_dir, "big.h5")
        results = os.path.join(out_dir, "results")
        os.makedirs(results)
        write_big_case(dump)
        out_path = os.path.join(results, "results.h5")
        run = self.interrupt_big_case("run", dump, "--out", out_path, "--threads", "2")
        self.assertEqual(os.listdir(results), [], "files left" + self.context(run))
        self.assertInStderr(run, f"{out_path} not written")


if __name__ == "__main__":
    unittest.main()
