"""From a failing case to an upstream bug report (issue 46): `attnscope-cli repro` on five real
failures, each bundle then run in a clean Python that can import torch and safetensors but not
attnscope_record, transformers or h5py, from a folder holding only repro.py and its tensors:
- the sample's fp16 score overflow (seed_cases.h5::/fp16_score_overflow);
- transformers' eager_attention_forward in fp16 with a 4-D finfo.min mask whose closed row has
  scores below -16: the sentinel plus the score rounds to -inf and the row is NaN;
- MiniLM (BERT, SDPA) with a NaN in the pad token's embedding: a masked NaN leak;
- a Llama whose repeat_kv tiles the kv heads (h -> h % Hk): recorded o off, which torch's own
  eager math does not reproduce, and repro.py names the head mapping;
- the packed sample's varlen document with a NaN in k (flash_attn, replayed on the CPU with the
  same semantics).
The MiniLM example's fp16 overflow (its own attention function) runs as eager math, said.
A dump whose name would be Python code stays a string in repro.py; a --python that cannot run
repro.py leaves the bundle written and unverified."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch
import transformers
from transformers.models.llama import modeling_llama

from attnscope_record import Recorder
import realmodel_scenarios

CLI = os.environ["ATTNSCOPE_CLI"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "resources", "samples")
# Runs repro.py as a user with only torch and safetensors would: isolated mode, and the
# packages attnscope's own tests have at hand made unimportable.
CLEAN = ("import runpy, sys\n"
         "for name in ('attnscope_record', 'transformers', 'h5py'):\n"
         "    sys.modules[name] = None\n"
         "sys.argv = ['repro.py']\n"
         "runpy.run_path('repro.py', run_name='__main__')\n")


class _Head:
    num_key_value_groups = 2
    training = False


def record_sentinel_overflow(path):
    """fp16 eager attention, batch 1 query row 5 closed by a finfo.min mask, its scores < -16."""
    torch.manual_seed(0)
    b, h, hk, s, d = 2, 4, 2, 16, 32
    q, k, v = torch.randn(b, h, s, d), torch.randn(b, hk, s, d), torch.randn(b, hk, s, d)
    k[1] += 2.0
    q[1, :, 5] = -3 * k[1].mean(1).repeat_interleave(2, 0)
    q, k, v = (x.half().requires_grad_() for x in (q, k, v))
    allowed = torch.ones(s, s, dtype=torch.bool).tril()[None, None].repeat(b, 1, 1, 1)
    allowed[1, 0, 5, :] = False
    mask = torch.zeros(b, 1, s, s, dtype=torch.float16).masked_fill(
        ~allowed, torch.finfo(torch.float16).min)
    weights = torch.randn(b, s, h, d, generator=torch.Generator().manual_seed(2)).half()
    rec = Recorder(path)
    with rec.step(0):
        o, _ = modeling_llama.eager_attention_forward(_Head(), q, k, v, mask, scaling=d ** -0.5)
        (o * weights).sum().backward()
    rec.close()


def tiled_repeat_kv(hidden, n_rep):
    """A port's repeat_kv that tiles the kv heads (h -> h % Hk) instead of grouping them."""
    return hidden.repeat(1, n_rep, 1, 1)


def record_tiled_gqa(path):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=128, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=64,
        pad_token_id=0, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config)
    ids = torch.randint(3, 128, (16, 16), generator=torch.Generator().manual_seed(1))
    rec = Recorder(path)
    real = modeling_llama.repeat_kv
    modeling_llama.repeat_kv = tiled_repeat_kv
    try:
        with rec.step(0):
            model(input_ids=ids, labels=ids).loss.backward()
    finally:
        modeling_llama.repeat_kv = real
    rec.close()


class ReproTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="attnscope_repro_")
        cls.sentinel = os.path.join(cls.dir, "sentinel.h5")
        record_sentinel_overflow(cls.sentinel)
        cls.pad_nan = os.path.join(cls.dir, "bert_pad_nan.h5")
        realmodel_scenarios.BY_NAME["bert_pad_nan"].run(cls.pad_nan)
        cls.gqa = os.path.join(cls.dir, "tiled_gqa.h5")
        record_tiled_gqa(cls.gqa)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def repro(self, ref, name, exit=0, *extra):
        out = os.path.join(self.dir, name)
        env = dict(os.environ, ATTNSCOPE_PYTHON=sys.executable)
        p = subprocess.run([CLI, "repro", ref, "--out", out, *extra], capture_output=True,
                           text=True, env=env, timeout=600, cwd=self.dir)
        self.assertEqual(p.returncode, exit, p.stdout + p.stderr)
        for f in ("repro.py", "tensors.safetensors", "case.h5", "README.md", "figure.png"):
            self.assertTrue(os.path.isfile(os.path.join(out, f)), f + "\n" + p.stdout + p.stderr)
        kept, total = (int(x.replace(",", "")) for x in
                       re.search(r": ([\d,]+) of ([\d,]+) elements", p.stdout).groups())
        self.assertLessEqual(kept * 10, total, p.stdout)
        with open(os.path.join(out, "README.md")) as f:
            readme = f.read()
        return out, p.stdout, readme

    def clean_run(self, bundle):
        """repro.py from a folder of its own, in the clean Python: (exit status, output)."""
        alone = tempfile.mkdtemp(dir=self.dir)
        for f in ("repro.py", "tensors.safetensors"):
            shutil.copy(os.path.join(bundle, f), alone)
        p = subprocess.run([sys.executable, "-I", "-c", CLEAN], cwd=alone, capture_output=True,
                           text=True, timeout=300)
        return p.returncode, p.stdout + p.stderr

    def test_sample_fp16_score_overflow(self):
        out, stdout, readme = self.repro(
            os.path.join(SAMPLES, "seed_cases.h5") + "::/fp16_score_overflow", "overflow")
        self.assertIn("repro: score_overflow S", stdout)
        self.assertIn("-> B=1 H=1 Sq=1 D=64", stdout)
        self.assertIn("Reproduced", readme)
        self.assertIn("query rows 12, keys 0", readme)  # the overflowing row of head 3
        status, text = self.clean_run(out)
        self.assertEqual(status, 1, text)
        self.assertIn("REPRODUCED: score_overflow with eager attention", text)
        self.assertIn("o: 64 non-finite (64 where fp64 is finite)", text)

    def test_fp16_eager_sentinel_overflow(self):
        out, stdout, readme = self.repro(self.sentinel + "::/step_000000/layer_00", "sentinel")
        self.assertIn("repro: fully_masked_row O", stdout)
        self.assertIn("finite bias sentinel", readme)
        self.assertIn("rounds to -inf", readme)
        self.assertIn("- backend: eager", readme)
        self.assertIn("query rows 5", readme)
        status, text = self.clean_run(out)
        self.assertEqual(status, 1, text)
        self.assertIn("REPRODUCED: fully_masked_row", text)

    def test_masked_nan_leak_from_a_padded_value(self):
        out, stdout, readme = self.repro(self.pad_nan + "::/step_000000/layer_00", "pad_nan")
        self.assertIn("repro: masked_nan_leak", stdout)
        self.assertIn("- backend: sdpa_flash", readme)
        self.assertIn("repro.py calls: sdpa with the sdpa_flash backend forced", readme)
        status, text = self.clean_run(out)
        self.assertEqual(status, 1, text)
        self.assertIn("REPRODUCED: masked_nan_leak with sdpa (sdpa_flash) on cpu", text)

    def test_gqa_head_mapping_mismatch_is_named_not_blamed_on_torch(self):
        # torch's eager math agrees with fp64 on the bundle: exit 1 of repro = not reproduced.
        out, stdout, readme = self.repro(self.gqa + "::/step_000000/layer_00", "gqa", 1)
        self.assertIn("repro: recorded_mismatch o", stdout)
        self.assertIn("-> B=1 H=8 Hk=4 Sq=16 D=16", stdout)  # every kv group kept
        self.assertIn("all 4 kv groups", stdout)
        status, text = self.clean_run(out)
        self.assertEqual(status, 0, text)
        self.assertIn("recorded o matches query head h reading kv head h % Hk", text)
        self.assertIn("a GQA head-mapping mismatch", readme)

    def test_nan_in_a_packed_sequence(self):
        out, stdout, readme = self.repro(
            os.path.join(SAMPLES, "packed_sequences.h5") + "::/packed_varlen_nan_k/seq_2",
            "packed")
        self.assertIn("repro: masked_nan_leak k", stdout)
        self.assertIn("query rows 0..8 and keys 0..8 as prefixes", stdout)
        # flash_attn does not run here: said, and the same semantics checked with SDPA MATH.
        self.assertIn("Not verified here: the recorded kernel (flash_attn", readme)
        status, text = self.clean_run(out)
        self.assertEqual(status, 1, text)
        self.assertIn("the recorded flash_attn needs CUDA", text)

    def test_minilm_custom_attention_fp16_overflow(self):
        # The MiniLM example's own attention function (backend "custom"): repro.py runs the
        # same semantics (eager math) and the verdict says it is not the recorded function.
        dump = os.path.join(self.dir, "minilm_overflow.h5")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "examples")]))
        subprocess.run([sys.executable, os.path.join(ROOT, "python", "examples", "minilm_dump.py"),
                        "--mode", "overflow", dump], check=True, env=env, capture_output=True,
                       timeout=600)
        out, stdout, readme = self.repro(dump + "::/step_000000/layer_02", "minilm")
        self.assertIn("repro: score_overflow S", stdout)
        self.assertIn("repro.py calls eager (custom)", stdout)
        self.assertIn("Not verified here: repro.py does not call the recorded attention (custom)",
                      readme)
        status, text = self.clean_run(out)
        self.assertEqual(status, 1, text)
        self.assertIn("REPRODUCED: score_overflow with eager attention", text)

    def test_a_hostile_file_name_stays_text_in_repro_py(self):
        # A dump name that would close repro.py's docstring and run a command, were it pasted.
        name = 'x"""\nimport os; os.system("touch PWNED")\n""".h5'
        dump = os.path.join(self.dir, name)
        shutil.copy(os.path.join(SAMPLES, "seed_cases.h5"), dump)
        out, stdout, readme = self.repro(dump + "::/fp16_score_overflow", "hostile")
        self.assertIn("Reproduced", readme)  # repro.py ran, here in self.dir
        self.assertFalse(os.path.exists(os.path.join(self.dir, "PWNED")))
        with open(os.path.join(out, "repro.py")) as f:
            self.assertIn('SOURCE = "' + dump.replace('"', '\\"').replace("\n", "\\x0a"),
                          f.read())

    def test_a_python_that_cannot_run_it_leaves_the_bundle_unverified(self):
        # /bin/false exits 1 like a reproduced failure, without repro.py's verdict line.
        out, stdout, readme = self.repro(
            os.path.join(SAMPLES, "seed_cases.h5") + "::/fp16_score_overflow", "no_python", 0,
            "--python", "/bin/false")
        self.assertIn("Not verified: repro.py could not be run with /bin/false", stdout)
        self.assertNotIn("Reproduced", readme)

    def test_a_finding_about_the_inputs_is_refused(self):
        ref = os.path.join(SAMPLES, "packed_sequences.h5") + "::/packed_sdpa_causal_mask/seq_1"
        p = subprocess.run([CLI, "repro", ref, "--out", os.path.join(self.dir, "mask")],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("no finding a kernel can be blamed for", p.stderr)


if __name__ == "__main__":
    unittest.main()
