"""attnscope-cli info: the case listing of the bundled sample (table and JSON), one case by
FILE::CASE, and exit 2 on a missing or non-HDF5 file."""
import os
import unittest

from cli_support import SAMPLE, CliTestCase, by_path


class CliInfoTest(CliTestCase):
    def test_cli_info_sample_lists_every_case(self):
        run = self.cli("info", SAMPLE, exit=0)
        self.assertInStdout(run, "37 cases", "/fp16_score_overflow", "/padding_mask_fp16",
                            "/exploding_grad", "/healthy_b2_h8_s1024", "/train/step_007/layer_03",
                            "B=2 H=8 Sq=1024 D=64")

    def test_cli_info_json_sample_shapes_and_config(self):
        doc = self.cli_json("info", "--json", SAMPLE, exit=0)
        cases = by_path(doc)
        self.assertEqual(len(doc["cases"]), 37)
        self.assertEqual(doc["rejected"], [])
        self.assertEqual(doc["cases"][0]["path"], "/train/step_000/layer_00")
        self.assertEqual([c["path"] for c in doc["cases"]][-6:],
                         ["/train/step_007/layer_03", "/exploding_grad", "/fp16_score_overflow",
                          "/healthy_b2_h8_s1024", "/padding_mask_fp16", "/recorded_mismatch"])
        healthy = cases["/healthy_b2_h8_s1024"]
        self.assertEqual(healthy["shape"], {"batch": 2, "heads": 8, "kv_heads": 8, "seqlen_q": 1024,
                                            "seqlen_k": 1024, "head_dim": 64, "head_dim_v": 64,
                                            "q_broadcast": False, "kv_broadcast": False})
        self.assertEqual(healthy["recorded"], ["o", "lse"])
        self.assertEqual(cases["/recorded_mismatch"]["recorded"], ["o", "lse", "dq", "dk", "dv"])
        self.assertIs(healthy["config"]["causal"], True)
        self.assertEqual(cases["/exploding_grad"]["tensors"]["q"]["dtype"], "bfloat16")
        self.assertEqual(cases["/padding_mask_fp16"]["tensors"]["bias"]["shape"], [2, 1, 96, 96])
        self.assertEqual(cases["/train/step_005/layer_02"]["config"]["step"], 5)
        scale = cases["/fp16_score_overflow"]["config"]["scale"]
        self.assertLess(abs(scale - 0.125), 1e-15, scale)

    def test_cli_info_case_ref_lists_one_case(self):
        self.assertInStdout(self.cli("info", f"{SAMPLE}::/exploding_grad", exit=0), "1 case")

    def test_cli_info_missing_file_exit_2(self):
        run = self.cli("info", os.path.join(self.scratch(), "no_such_dump.h5"), exit=2)
        self.assertInStderr(run, "no_such_dump.h5")

    def test_cli_info_not_hdf5_exit_2(self):
        path = os.path.join(self.scratch(), "not_hdf5.h5")
        with open(path, "w") as f:
            f.write("this is not an HDF5 file\n")
        self.assertInStderr(self.cli("info", path, exit=2), "not_hdf5.h5", "hint:")


if __name__ == "__main__":
    unittest.main()
