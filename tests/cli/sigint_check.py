"""Sends SIGINT to a running attnscope-cli and checks that it stops cleanly (and the progress
line of scan on a terminal).

usage: sigint_check.py SCENARIO CLI DUMP [OUT_DIR]
  scan-json  scan --json DUMP: once a case is printed, SIGINT -> exit 130, the JSON document
             is complete and valid, lists a prefix of the cases in file order, says
             "interrupted": true, and stderr says "interrupted after N of M cases".
  scan-table the same for the table: exit 130, the summary line says "interrupted, N of M".
  run        run DUMP --out OUT_DIR/results.h5 (OUT_DIR made empty first): once a case is
             written, SIGINT -> exit 130, OUT_DIR is still empty (no output, no temporary),
             stderr says "... not written".
  run-twice  the same with two SIGINTs in a row (the second exits at once): no visible file
             in OUT_DIR (a hidden temporary of the writer may stay; the next run removes it).
  sweep      sweep DUMP (FILE::CASE) with many points: SIGINT -> exit 130, stdout empty,
             stderr says "interrupted after".
  progress-tty  scan --json DUMP with stderr on a pseudo-terminal: a "scan: N/M cases"
             progress line is shown there and cleared at the end (no SIGINT).
  scan-one-big, run-one-big  DUMP is written first: one fp16 case of [1, 2, 8192, 64] whose
             analysis takes minutes. SIGINT a second into it stops the kernel in flight:
             exit 130, nothing reported (scan --json: "cases" empty, "interrupted": true;
             run: OUT_DIR empty), stderr says "interrupted after 0 of 1 cases". The time
             from SIGINT to exit is printed, not checked.
The signal is sent only once the handler is installed (SigCgt in /proc/PID/status).
"""
import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


def handler_installed(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False


def start(command):
    # stderr goes to a file: mixing a pipe with the line reads of stdout could lose buffered data
    err = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
    proc.err_file = err
    return proc


def wait_for_handler(proc) -> None:
    deadline = time.time() + 120
    while not handler_installed(proc.pid):
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit(f"the process never installed its SIGINT handler: {proc.returncode}")
        time.sleep(0.01)


def read_until(proc, marker: str) -> str:
    """stdout lines up to and including the first that contains `marker`."""
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise SystemExit(f"stdout ended before {marker!r}:\n" + "".join(seen)[-2000:])


def drain(fd: int) -> str:
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


def finish(proc, head: str):
    rest = proc.stdout.read()
    proc.wait(timeout=300)
    proc.err_file.seek(0)
    return head + rest, proc.err_file.read()


def expect(condition: bool, what: str, out: str, err: str) -> None:
    if not condition:
        print("stdout (tail):\n" + out[-3000:])
        print("stderr:\n" + err[-3000:])
        raise SystemExit("FAILED: " + what)


def write_big_case(path: str) -> None:
    import h5py
    import numpy as np

    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        g = f.create_group("/big")
        g.attrs["dtype"] = "float16"
        for name in ("q", "k", "v", "do"):
            g.create_dataset(name, data=rng.standard_normal((1, 2, 8192, 64)).astype(np.float16))


def interrupt_big_case(command, out_dir: str):
    """Runs `command`, sends SIGINT a second after the handler is installed; (out, err)."""
    proc = start(command)
    wait_for_handler(proc)
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc, "")
    print(f"exit {proc.returncode} {time.monotonic() - sent:.2f} s after SIGINT")
    expect(proc.returncode == 130, f"exit code {proc.returncode}, expected 130", out, err)
    expect("interrupted after 0 of 1 cases" in err, "stderr says 0 of 1 cases", out, err)
    return out, err


def main() -> int:
    scenario, cli, dump = sys.argv[1:4]
    out_dir = sys.argv[4] if len(sys.argv) > 4 else ""
    if scenario in ("scan-json", "scan-table"):
        all_paths = json.loads(subprocess.run([cli, "info", "--json", dump], capture_output=True,
                                              text=True).stdout)
        all_paths = [c["path"] for c in all_paths["cases"]]
        command = [cli, "scan", dump, "--threads", "2"] + (["--json"] if scenario == "scan-json" else [])
        proc = start(command)
        head = read_until(proc, '"path"' if scenario == "scan-json" else " B=")
        wait_for_handler(proc)
        proc.send_signal(signal.SIGINT)
        out, err = finish(proc, head)
        expect(proc.returncode == 130, f"exit code {proc.returncode}, expected 130", out, err)
        if scenario == "scan-json":
            doc = json.loads(out)
            paths = [c["path"] for c in doc["cases"]]
            expect(doc["interrupted"] is True and doc["cases_total"] == len(all_paths),
                   "interrupted / cases_total", out, err)
            expect(0 < len(paths) < len(all_paths), f"{len(paths)} cases reported", out, err)
            expect(paths == all_paths[: len(paths)], "cases are a prefix in file order", out, err)
            expected = f"interrupted after {len(paths)} of {len(all_paths)} cases"
            expect("\r" not in err, "no progress line when stderr is not a terminal", out, err)
        else:
            rows = [row.split()[0] for row in out.splitlines() if row.startswith("/") and " B=" in row]
            expect(0 < len(rows) < len(all_paths), f"{len(rows)} rows", out, err)
            expect(rows == all_paths[: len(rows)], "rows are a prefix in file order", out, err)
            expect(f"interrupted, {len(rows)} of {len(all_paths)} cases scanned" in out,
                   "summary line", out, err)
            expected = f"interrupted after {len(rows)} of {len(all_paths)} cases"
        expect(expected in err, f"stderr says {expected!r}", out, err)
    elif scenario in ("run", "run-twice"):
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        out_path = os.path.join(out_dir, "results.h5")
        proc = start([cli, "run", dump, "--out", out_path, "--threads", "2"])
        head = read_until(proc, "findings")
        wait_for_handler(proc)
        proc.send_signal(signal.SIGINT)
        if scenario == "run-twice":
            proc.send_signal(signal.SIGINT)
        out, err = finish(proc, head)
        expect(proc.returncode == 130, f"exit code {proc.returncode}, expected 130", out, err)
        left = sorted(os.listdir(out_dir))
        if scenario == "run":
            expect(left == [], f"files left in {out_dir}: {left}", out, err)
            expect(f"{out_path} not written" in err, "stderr names the output", out, err)
        else:  # the writer's hidden ".NAME.PID-N.tmp" may stay; the next writer removes it
            visible = [name for name in left if not name.startswith(".")]
            expect(visible == [], f"files left in {out_dir}: {left}", out, err)
    elif scenario == "sweep":
        proc = start([cli, "sweep", dump, "--scales", "0.001:1000:400"])
        wait_for_handler(proc)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = finish(proc, "")
        expect(proc.returncode == 130, f"exit code {proc.returncode}, expected 130", out, err)
        expect(out == "", "nothing on stdout", out, err)
        expect("interrupted after" in err and "scale points" in err, "stderr message", out, err)
    elif scenario == "progress-tty":
        master, slave = pty.openpty()
        proc = subprocess.Popen([cli, "scan", "--json", dump, "--threads", "2"],
                                stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        tty = []
        reader = threading.Thread(target=lambda: tty.append(drain(master)))
        reader.start()
        out = proc.stdout.read()
        proc.wait(timeout=300)
        reader.join()
        err = tty[0]
        expect(proc.returncode == 1, f"exit code {proc.returncode}, expected 1", out, err)
        expect(len(json.loads(out)["cases"]) > 0, "JSON on stdout", out, err)
        expect("\rscan: " in err and " cases" in err and err.endswith("\r\x1b[K"),
               "a progress line on the terminal, cleared at the end", out, err)
    elif scenario in ("scan-one-big", "run-one-big"):
        shutil.rmtree(out_dir, ignore_errors=True)
        results = os.path.join(out_dir, "results")
        os.makedirs(results)
        write_big_case(dump)
        if scenario == "scan-one-big":
            out, err = interrupt_big_case([cli, "scan", "--json", dump, "--threads", "2"], out_dir)
            doc = json.loads(out)
            expect(doc["cases"] == [] and doc["interrupted"] is True and doc["cases_total"] == 1,
                   "no case reported, interrupted", out, err)
        else:
            out_path = os.path.join(results, "results.h5")
            out, err = interrupt_big_case(
                [cli, "run", dump, "--out", out_path, "--threads", "2"], out_dir)
            expect(os.listdir(results) == [], f"files left in {results}", out, err)
            expect(f"{out_path} not written" in err, "stderr names the output", out, err)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
