"""attnscope-cli run: recomputed results written as a schema-1 dump that info and h5py read, the
settings it ran with recorded per case, --case globs, and no overwriting of the input. Each test
writes its own output."""
import json
import os
import unittest

import h5py

from cli_support import SAMPLE, CliTestCase


class CliRunTest(CliTestCase):
    def run_recorded_mismatch(self, *settings):
        """Runs /recorded_mismatch (exit 1: its recorded gradients differ) into a fresh file."""
        out = os.path.join(self.scratch(), "results.h5")
        run = self.cli("run", f"{SAMPLE}::/recorded_mismatch", *settings, "--out", out, exit=1)
        return run, out

    def test_cli_run_writes_recomputed_case(self):
        run, _ = self.run_recorded_mismatch()
        self.assertInStdout(run, "wrote 1 case")

    def test_cli_run_output_lists_recorded_outputs(self):
        _, out = self.run_recorded_mismatch()
        doc = self.cli_json("info", "--json", out, exit=0)
        self.assertEqual([(c["path"], c["recorded"]) for c in doc["cases"]],
                         [("/recorded_mismatch", ["o", "lse", "dq", "dk", "dv"])])

    def test_cli_run_output_readable_by_h5py(self):
        _, out = self.run_recorded_mismatch()
        with h5py.File(out, "r") as f:
            g = f["/recorded_mismatch"]
            self.assertEqual(g["o"].shape, (1, 4, 64, 32))
            self.assertEqual(g["m"].shape, (1, 4, 64))
            self.assertEqual({x["kind"] for x in json.loads(g.attrs["findings"])},
                             {"recorded_mismatch"})

    def test_cli_run_default_settings_read_back(self):
        _, out = self.run_recorded_mismatch()
        with h5py.File(out, "r") as f:
            a = dict(f["/recorded_mismatch"].attrs)
        self.assertEqual((a["run_precision"], a["run_mode"], a["run_mask_fill"]),
                         ("fp16", "fused", "neg_inf"), a)
        self.assertLess(abs(a["run_scale"] - 32**-0.5), 1e-15, a)

    def test_cli_run_records_settings(self):
        run, _ = self.run_recorded_mismatch("--precision", "fp16", "--mode", "unfused",
                                            "--scale", "0.5", "--mask-fill", "min")
        self.assertInStdout(run, "wrote 1 case")

    def test_cli_run_settings_read_back(self):
        _, out = self.run_recorded_mismatch("--precision", "fp16", "--mode", "unfused",
                                            "--scale", "0.5", "--mask-fill", "min")
        with h5py.File(out, "r") as f:
            a = f["/recorded_mismatch"].attrs
            got = {k: a[k] for k in a if k.startswith("run_")}
        self.assertEqual(got, {"run_precision": "fp16", "run_mode": "unfused", "run_scale": 0.5,
                               "run_mask_fill": "finfo_min", "run_backend": "cpu_instrumented"})

    def test_cli_run_case_glob_writes_matching_cases(self):
        out = os.path.join(self.scratch(), "results.h5")
        run = self.cli("run", SAMPLE, "--case", "/train/step_001/*", "--out", out, exit=0)
        self.assertInStdout(run, "wrote 4 cases")

    def test_cli_run_refuses_to_overwrite_input_exit_2(self):
        self.assertInStderr(self.cli("run", SAMPLE, "--out", SAMPLE, exit=2), "is the input file")


if __name__ == "__main__":
    unittest.main()
