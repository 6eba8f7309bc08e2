"""Warn before the NaN (issue 45), on a real instability (instability_run.py): the health
report of the unstable run warns at least 20 % of the run before its first non-finite step, in
the layer that fails; the warning of the head that fails first leads by 20 % too and predicts
that step within 25 %; the report exits 1. The control run (lower learning rate, as many steps)
stays finite and gets no warning (exit 0). Prints the leads and the prediction error. `scan
--follow` on the run while it records prints the warning and then scans the non-finite step's
cases. The step that fails depends on the CPU (instability_run.py), never on a fixed number."""
import re
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import instability_run as run

CLI = os.environ.get("ATTNSCOPE_CLI", "attnscope-cli")


def health(path):
    done = subprocess.run([CLI, "health", path, "--json"], capture_output=True, text=True,
                          timeout=300)
    if done.returncode not in (0, 1):
        raise AssertionError(f"health {path}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return done.returncode, json.loads(done.stdout)


class WarnBeforeTheNaN(unittest.TestCase):
    def test_unstable_run_is_warned_ahead_and_the_control_is_not(self):
        with tempfile.TemporaryDirectory() as folder:
            unstable = os.path.join(folder, "unstable.h5")
            failed, per_step = run.train(unstable, run.UNSTABLE_RATE, run.MAX_STEPS)
            self.assertIsNotNone(failed, "the unstable run stayed finite")
            code, report = health(unstable)
            self.assertEqual(code, 1)
            self.assertEqual(report["first_nonfinite"]["step"], failed)
            warnings = [w for w in report["warnings"] if w["severity"] == "warning"]
            self.assertTrue(warnings)
            self.assertEqual({w["kind"] for w in warnings}, {"logit_growth"})
            first = min(warnings, key=lambda w: w["first_step"])
            failing = report["series"][report["first_nonfinite"]["series"]]
            self.assertEqual(first["layer"], failing["layer"])
            self.assertGreaterEqual((failed - first["first_step"]) / failed, 0.2)
            # The head that fails first: warned ahead, and its step predicted.
            own = [w for w in warnings if w["series"] in report["first_nonfinite"]["failed_series"]]
            self.assertTrue(own, "no warning on a head that fails")
            own = min(own, key=lambda w: w["first_step"])
            lead = (failed - own["first_step"]) / failed
            error = (own["predicted_at_first"] - failed) / failed
            print(f"\nunstable: non-finite at step {failed}; first warning at step "
                  f"{first['first_step']} on layer {first['layer']} head {first['head']}; the "
                  f"failing head {own['head']} warned at step {own['first_step']} ({lead:.0%} "
                  f"of the run ahead), predicting step {own['predicted_at_first']} "
                  f"(error {error:+.0%})")
            self.assertGreaterEqual(lead, 0.2)
            self.assertLessEqual(abs(error), 0.25)
            self.assertIn("qk-layernorm", " ".join(own["remedies"]))

            control = os.path.join(folder, "control.h5")
            steps = failed + 1
            failed, _ = run.train(control, run.CONTROL_RATE, steps)
            self.assertIsNone(failed)
            code, report = health(control)
            self.assertEqual(code, 0)
            self.assertEqual([w for w in report["warnings"] if w["severity"] == "warning"], [])
            self.assertIsNone(report["first_nonfinite"])
            print(f"control: finite for {steps} steps, no warning; {per_step * 1000:.1f} ms "
                  "per recorded step of the unstable run")


    def test_scan_follow_prints_the_warning_while_the_run_records(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "run.h5")
            recording = subprocess.Popen([sys.executable, run.__file__, path],
                                         stderr=subprocess.PIPE, text=True)
            deadline = time.time() + 120
            while not os.path.exists(path) and time.time() < deadline:
                time.sleep(0.1)  # the first statistics land within 5 s of the first step
            with open(os.path.join(folder, "out"), "w") as out:
                follower = subprocess.Popen([CLI, "scan", path, "--follow"], stdout=out,
                                            stderr=subprocess.DEVNULL)
            try:
                self.assertEqual(recording.wait(timeout=300), 0)
                said = re.search(r"first non-finite step: (\d+)", recording.stderr.read())
                self.assertIsNotNone(said, "the run stayed finite")
                case = f"/step_{int(said.group(1)):06d}/layer_00"
                deadline = time.time() + 60
                text = ""
                while time.time() < deadline:
                    with open(os.path.join(folder, "out")) as f:
                        text = f.read()
                    if "health: logit_growth" in text and case in text:
                        break
                    time.sleep(0.2)
                follower.send_signal(signal.SIGINT)
                follower.wait(timeout=30)
            finally:
                if follower.poll() is None:
                    follower.kill()
            self.assertIn("health: logit_growth: layer 0", text)
            self.assertIn(case, text)
            # Each warning once, however many times the file grew.
            lines = [line for line in text.splitlines() if line.startswith("health: ")]
            self.assertEqual(len(lines), len(set(lines)))


if __name__ == "__main__":
    unittest.main()
