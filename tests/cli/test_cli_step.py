"""attnscope-cli step: the fused backward of one (batch, head) walked to its first non-finite
step (exit 1), exit 0 when every step is finite, exit 2 on a bad --head."""
import unittest

from cli_support import SAMPLE, CliTestCase


class CliStepTest(CliTestCase):
    # The fully masked rows of batch 1 under a -inf fill make D NaN in the fused backward.
    def test_cli_step_padding_inf_fill_nan_at_backward_preprocess(self):
        run = self.cli("step", f"{SAMPLE}::/padding_mask_fp16", "--mask-fill", "inf", "--batch",
                       "1", exit=1)
        self.assertInStdout(run, "first non-finite step 0: backward_preprocess", "rows 0-95",
                            "[70, 0] = nan")

    def test_cli_step_exploding_grad_finite_exit_0(self):
        run = self.cli("step", f"{SAMPLE}::/exploding_grad", "--head", "5", exit=0)
        self.assertInStdout(run, "every step finite")

    def test_cli_step_bad_head_exit_2(self):
        run = self.cli("step", f"{SAMPLE}::/exploding_grad", "--head", "99", exit=2)
        self.assertInStderr(run, "bad --head")


if __name__ == "__main__":
    unittest.main()
