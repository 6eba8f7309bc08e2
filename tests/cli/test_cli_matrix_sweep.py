"""attnscope-cli matrix (and its alias compare): every variant x precision of one case against
fp64; sweep: the scale at which a precision turns non-finite."""
import unittest

from cli_support import SAMPLE, CliTestCase


def rows_of(doc, variant, precision):
    return [r for r in doc["rows"] if r["variant"] == variant and r["precision"] == precision]


class CliMatrixSweepTest(CliTestCase):
    def test_cli_matrix_score_overflow_unfused_fp16_breaks_fused_holds(self):
        doc = self.cli_json("matrix", "--json", f"{SAMPLE}::/fp16_score_overflow", exit=1)
        self.assertEqual(doc["case"], "/fp16_score_overflow")
        self.assertEqual([(r["ran"], r["tensors"]["o"]["max_error"])
                          for r in rows_of(doc, "reference", "fp64")], [(True, 0)])
        self.assertEqual([r["finite"] for r in rows_of(doc, "cpu-unfused", "fp16")], [False])
        self.assertEqual([r["finite"] for r in rows_of(doc, "cpu-fused", "fp16")], [True])
        fused_fp32 = [r["tensors"]["o"]["max_error"] for r in rows_of(doc, "cpu-fused", "fp32")]
        self.assertEqual(len(fused_fp32), 1, fused_fp32)
        self.assertLess(fused_fp32[0], 1e-4)
        self.assertEqual([(r["variant"], r["precision"]) for r in doc["rows"]
                          if not r["supported"] and not r["reason"]], [],
                         "unsupported rows without a reason")
        variants = {"reference", "cpu-fused", "cpu-upcast", "cpu-unfused", "torch-eager",
                    "torch-sdpa-math", "torch-flash-cpu"}
        self.assertEqual(variants - {r["variant"] for r in doc["rows"]}, set(), "variants missing")
        self.assertStartsWith([r["semantics"] for r in doc["rows"]
                               if r["variant"] == "torch-sdpa-math"][0],
                              "SDPA MATH: fp16/bf16 upcast to fp32")
        self.assertStartsWith(doc["oracle"], "fp64 reference")

    def test_cli_matrix_table_healthy_small_case(self):
        run = self.cli("matrix", f"{SAMPLE}::/train/step_000/layer_00", exit=0)
        self.assertInStdout(run, "outputs vs fp64", "unsupported: cpu-fused runs",
                            "torch-eager      eager math, every op in the precision")

    def test_cli_compare_is_the_matrix_command(self):
        run = self.cli("compare", f"{SAMPLE}::/train/step_000/layer_00", exit=0)
        self.assertInStdout(run, "outputs vs fp64")

    def test_cli_matrix_unknown_case_exit_2(self):
        run = self.cli("matrix", f"{SAMPLE}::/nope", exit=2)
        self.assertInStderr(run, "seed_cases.h5", "/nope")

    def test_cli_matrix_without_case_exit_2(self):
        self.assertInStderr(self.cli("matrix", SAMPLE, exit=2), "names no case")

    # The fp16 unfused threshold of step 3 is 65504 / max|q.k| = 6.96.
    def test_cli_sweep_finds_fp16_unfused_threshold(self):
        doc = self.cli_json("sweep", "--json", f"{SAMPLE}::/train/step_003/layer_00", "--scales",
                            "0.01:100:9", "--precision", "fp16", exit=0)
        series = doc["series"]
        self.assertEqual([s["mode"] for s in series], ["fused", "unfused"])
        self.assertEqual(len(doc["scales"]), 9)
        self.assertEqual([s["threshold"] for s in series if s["mode"] == "fused"], [None])
        unfused = [s["threshold"] for s in series if s["mode"] == "unfused"]
        self.assertEqual(len(unfused), 1, unfused)
        self.assertTrue(6.8 < unfused[0] < 7.1, unfused[0])
        self.assertEqual([(s["mode"], len(s["points"]), s["case_scale_finite"]) for s in series
                          if not (len(s["points"]) == 9 and s["case_scale_finite"])], [])
        self.assertEqual([p["finite"] for p in series[1]["points"]], [True] * 6 + [False] * 3)

    def test_cli_sweep_table_case_scale_nonfinite_exit_1(self):
        run = self.cli("sweep", f"{SAMPLE}::/fp16_score_overflow", "--scales", "0.01:1:5",
                       "--forward-only", exit=1)
        self.assertInStdout(run, "fp16 unfused", "NON-FINITE")

    def test_cli_sweep_bad_scales_exit_2(self):
        run = self.cli("sweep", f"{SAMPLE}::/exploding_grad", "--scales", "1:0.1:5", exit=2)
        self.assertInStderr(run, "bad --scales")


if __name__ == "__main__":
    unittest.main()
