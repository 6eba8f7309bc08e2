"""`attnscope-cli scan --follow` on a dump a training run keeps recording into: attnscope_record
writes step 0, then steps 1-3 (one with a NaN in q) while scan follows; the steps land in later JSON
documents, in order, after the first scan's document of step 0 alone (steps written close together
may share a document: how many depends on the machine's speed), the NaN step with its findings; Ctrl-C ends it with the status of every batch. A group that lands but cannot be read as a case
is listed once, and makes the status 2."""
import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

from cli_support import CLI, DATA, CliTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_PACKAGE = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
# One recording run: step 0, then (after a line on stdin) steps 1-3, step 2 with a NaN.
RECORD = os.path.normpath(os.path.join(HERE, "..", "data", "record_live_run.py"))


def documents(text):
    """The JSON documents of a --follow --json output, in order (the last may be partial)."""
    decoder, at, out = json.JSONDecoder(), 0, []
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        try:
            doc, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return out
        out.append(doc)


def read(path):
    with open(path) as f:
        return f.read()


class Follow(CliTestCase):
    def test_cli_scan_follow_scans_steps_as_the_recorder_writes_them(self):
        path = os.path.join(DATA, "follow", "run.h5")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        for stale in (path, path + ".writing"):
            if os.path.exists(stale):
                os.remove(stale)
        env = dict(os.environ, PYTHONPATH=PYTHON_PACKAGE, OMP_NUM_THREADS="1")
        run = subprocess.Popen([sys.executable, RECORD, path], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env)
        self.assertEqual(run.stdout.readline().strip(), "step 0 written")
        out_path = path + ".out"
        with open(out_path, "w") as out, open(path + ".err", "w") as err:
            follower = subprocess.Popen([CLI, "scan", path, "--follow", "--json"], stdout=out,
                                        stderr=err)
        try:
            # Steps 1-3 only once the first scan printed (a slow machine may take seconds).
            deadline = time.time() + 120
            while time.time() < deadline and not documents(read(out_path)):
                self.assertIsNone(follower.poll(), "still following")
                time.sleep(0.2)
            run.communicate("go\n", timeout=300)  # steps 1-3 while scan follows
            self.assertEqual(run.returncode, 0)
            deadline = time.time() + 60
            while time.time() < deadline:
                docs = documents(read(out_path))
                if sum(len(d["cases"]) for d in docs) == 4:
                    break
                time.sleep(0.2)
            self.assertIsNone(follower.poll(), "still following")
            follower.send_signal(signal.SIGINT)
            code = follower.wait(timeout=30)
        finally:
            if follower.poll() is None:
                follower.kill()
        with open(path + ".err") as f:
            err = f.read()
        self.assertEqual(code, 1, err)  # step 2's NaN is an error finding
        self.assertIn("following " + path, err)
        with open(out_path) as f:
            docs = documents(f.read())
        self.assertEqual([c["path"] for c in docs[0]["cases"]], ["/step_000000/layer_00"])
        self.assertGreaterEqual(len(docs), 2, "steps 1-3 come after the first scan")
        self.assertTrue(all(d["cases"] for d in docs), "no empty batch is printed")
        cases = [c for d in docs for c in d["cases"]]
        self.assertEqual([c["path"] for c in cases], ["/step_%06d/layer_00" % n for n in range(4)])
        for n, case in enumerate(cases):
            kinds = {f["kind"] for f in case["findings"]}
            self.assertEqual("nonfinite_input" in kinds, n == 2, (n, kinds))
        self.assertEqual(len(self.cli_json("info", path, "--json", exit=0)["cases"]), 4)

    def test_cli_scan_follow_lists_a_group_it_cannot_read_once(self):
        path = os.path.join(DATA, "follow_rejected", "run.h5")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path):
            os.remove(path)
        rng = np.random.default_rng(0)

        def add(step, k_dim):
            with h5py.File(path, "a") as f:
                g = f.create_group("/step_%06d/layer_00" % step)
                g["q"] = rng.standard_normal((1, 2, 4, 8), dtype=np.float32)
                g["k"] = rng.standard_normal((1, 2, 4, k_dim), dtype=np.float32)
                g["v"] = rng.standard_normal((1, 2, 4, 8), dtype=np.float32)

        def wait_for(file, text):
            deadline = time.time() + 120
            while time.time() < deadline and text not in read(file):
                self.assertIsNone(follower.poll(), "still following")
                time.sleep(0.2)
            self.assertIn(text, read(file))

        add(0, 8)
        out_path, err_path = path + ".out", path + ".err"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            follower = subprocess.Popen([CLI, "scan", path, "--follow"], stdout=out, stderr=err)
        try:
            wait_for(out_path, "1 case scanned")
            add(1, 4)  # k's head_dim 4 against q's 8: not a case
            wait_for(err_path, "skipped /step_000001/layer_00/k, it cannot be read as a case")
            add(2, 8)
            wait_for(out_path, "/step_000002/layer_00")
            follower.send_signal(signal.SIGINT)
            code = follower.wait(timeout=30)
        finally:
            if follower.poll() is None:
                follower.kill()
        err = read(err_path)
        self.assertEqual(err.count("skipped /step_000001/layer_00/k"), 1, err)
        self.assertEqual(code, 2, err)
