"""Real-model suite (label realmodel): every scenario of realmodel_scenarios.py records one
training step of a real transformers / torch model and `attnscope-cli scan` judges it with
default options. Healthy steps: exit 0, no error finding, every recorded output within the
accuracy rule of the replay, the replay naming the backend that ran. Induced failures: the
first bad case, the finding's kind, tensor, head and rows, and its remedy, where the scenario
says. Prints per scenario the error findings, the recorder's step overhead and scan time."""
import json
import os
import subprocess
import tempfile
import time
import unittest

import realmodel_scenarios as scenarios

CLI = os.environ.get("ATTNSCOPE_CLI", "attnscope-cli")


def scan(path):
    """(exit code, scan --json document, seconds) of attnscope-cli scan with default options."""
    start = time.perf_counter()
    run = subprocess.run([CLI, "scan", path, "--json"], capture_output=True, text=True,
                         timeout=600)
    seconds = time.perf_counter() - start
    if run.returncode not in (0, 1):
        raise AssertionError(f"scan {path}: exit {run.returncode}\n{run.stderr[-3000:]}")
    return run.returncode, json.loads(run.stdout), seconds


def errors(doc):
    return [(c["path"], f) for c in doc["cases"] for f in c["findings"]
            if f["severity"] == "error"]


def covers(location, head, rows):
    heads = location["heads"] or [location["head"], location["head"]]
    head_ok = head < 0 or (heads[0] is not None and heads[0] <= head <= heads[1])
    rows_ok = not rows or (location["rows"] is not None and location["rows"][0] <= rows[0]
                           and rows[1] <= location["rows"][1])
    return head_ok and rows_ok


class RealModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.lines = []

    @classmethod
    def tearDownClass(cls):
        print("\nscenario                        cases  errors  step s (plain)  overhead  "
              "scan s/case")
        for line in cls.lines:
            print(line)
        cls.dir.cleanup()

    def record_and_scan(self, scenario):
        path = os.path.join(self.dir.name, scenario.name + ".h5")
        recorded = scenario.run(path)
        rec = recorded.recorder
        self.assertIsNone(rec.stopped, scenario.name)
        self.assertTrue(rec.written, f"{scenario.name}: nothing recorded")
        code, doc, seconds = scan(path)
        cases = len(doc["cases"])
        self.lines.append(
            f"{scenario.name:31s} {cases:5d}  {len(errors(doc)):6d}  {recorded.seconds:6.3f} "
            f"({recorded.plain_seconds:6.3f})  {recorded.seconds - recorded.plain_seconds:+7.3f}"
            f"  {seconds / max(cases, 1):8.3f}")
        return code, doc

    def check_healthy(self, scenario):
        code, doc = self.record_and_scan(scenario)
        self.assertEqual([(p, f["kind"], f["message"]) for p, f in errors(doc)], [],
                         scenario.name)
        self.assertEqual(code, 0, scenario.name)
        for case in doc["cases"]:
            self.assertTrue(case["replay"]["backend_known"], case["path"])
            self.assertFalse(case["config"]["what_if"], case["path"])
            self.assertTrue(case["stats"]["recorded"], f"{case['path']}: nothing compared")
            for r in case["stats"]["recorded"]:
                self.assertTrue(r["within_rule"], (scenario.name, case["path"], r))

    def check_failure(self, scenario):
        code, doc = self.record_and_scan(scenario)
        want = scenario.expected
        self.assertEqual(code, 1 if want.severity == "error" else 0, scenario.name)
        if want.severity == "error":
            self.assertEqual(doc["first_bad"]["path"], want.case, doc["first_bad"])
            # Named with its micro-batch when the step ran several.
            if "/micro_" in want.case:
                micro = int(want.case.split("/micro_")[1][:2])
                self.assertIn(f"micro-batch {micro}, ", doc["first_bad"]["text"])
        case = next(c for c in doc["cases"] if c["path"] == want.case)
        found = [f for f in case["findings"] if f["kind"] == want.kind
                 and (not want.tensor or f["tensor"] == want.tensor)
                 and f["severity"] == want.severity]
        self.assertTrue(found, f"{scenario.name}: no {want.severity} {want.kind} at {want.case}: "
                        f"{[(f['kind'], f['severity'], f['tensor']) for f in case['findings']]}")
        f = found[0]
        self.assertTrue(any(covers(loc, want.head, want.rows) for loc in f["locations"]),
                        (scenario.name, f["locations"]))
        self.assertIn(want.remedy, f["remedy"] + f["message"], scenario.name)
        from_backward = bool(doc["first_bad"] and doc["first_bad"]["from_backward"])
        for earlier in doc["cases"]:  # found first where it starts (a forward: in file order)
            if earlier["path"] == want.case or from_backward:
                break
            self.assertFalse(any(g["kind"] == want.kind and g["severity"] == want.severity
                                 and (not want.tensor or g["tensor"] == want.tensor)
                                 for g in earlier["findings"]), earlier["path"])


def add_tests():
    for scenario in scenarios.SCENARIOS:
        check = RealModelTest.check_failure if scenario.expected else RealModelTest.check_healthy
        setattr(RealModelTest, f"test_{scenario.name}",
                lambda self, s=scenario, c=check: c(self, s))


add_tests()

if __name__ == "__main__":
    unittest.main()
