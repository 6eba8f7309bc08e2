"""Recording transformers' eager attention: the `eager_attention_forward` of real transformers
models (Llama with GQA and a padding mask, Gemma-2 with logit soft-capping) is recorded with
backend "eager", its o and dO stored [B, H, Sq, D], its keep-mask read when dropout trains, and
the case judged clean by attnscope-cli scan; a call whose arguments change the scores in a way
the replay does not compute (attention sinks) is refused with a warning; the functions are put
back when the recording ends."""
import os
import sys
import tempfile
import types
import unittest
import warnings

import torch
import transformers

from attnscope_record import Recorder
from attnscope_test_util import attention_math, cosine, read_case, scan_errors

LAYER = "/step_000000/layer_01"


def llama(dtype=torch.float32, dropout=0.0):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0,
        attention_dropout=dropout, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(config).to(dtype)
    model.train()
    ids = torch.randint(3, 128, (2, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, :4] = 0  # left padding
    return model, ids, mask


def train_step(rec, model, ids, mask):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a stopped recording fails the test
        with rec.step(0):
            model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
        rec.close()


class EagerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "eager.h5")

    def tearDown(self):
        self.dir.cleanup()

    def test_llama_eager_calls_are_recorded_as_the_model_computed_them(self):
        model, ids, mask = llama()
        rec = Recorder(self.path, model=model)
        train_step(rec, model, ids, mask)
        self.assertEqual(rec.written, ["/step_000000/layer_00", LAYER])
        t, attrs = read_case(self.path, LAYER)
        self.assertEqual(sorted(t), ["bias", "dk", "do", "dq", "dv", "k", "o", "q", "v"])
        self.assertEqual((attrs["backend"], attrs["function"]), ("eager",
                                                                 "eager_attention_forward"))
        self.assertEqual(attrs["name"], "model.layers.1.self_attn")
        self.assertTrue(attrs["enable_gqa"])
        self.assertAlmostEqual(attrs["scale"], 16 ** -0.5)
        self.assertEqual(tuple(t["q"].shape), (2, 4, 12, 16))
        self.assertEqual(tuple(t["k"].shape), (2, 2, 12, 16))
        self.assertEqual(tuple(t["o"].shape), (2, 4, 12, 16))  # returned [B, S, H, D]
        self.assertEqual(tuple(t["do"].shape), (2, 4, 12, 16))
        # The stored o and gradients are those of softmax(q k^T * scale + bias) v with k, v
        # repeated to the query heads: the transposition back to BHSD is right.
        k, v = (x.repeat_interleave(2, dim=1) for x in (t["k"], t["v"]))
        ref = attention_math(t["q"], k, v, t["do"], attrs["scale"], bias=t["bias"])
        self.assertLess(float((t["o"].double() - ref["o"]).abs().max()), 1e-5)
        self.assertGreater(cosine(t["dq"], ref["dq"]), 1 - 1e-9)
        dk = ref["dk"].unflatten(1, (2, 2)).sum(2)
        self.assertGreater(cosine(t["dk"], dk), 1 - 1e-9)
        self.assertEqual(scan_errors(self.path), [])

    def test_eager_dropout_keep_mask_is_read_off_the_weights(self):
        model, ids, mask = llama(torch.bfloat16, dropout=0.3)
        rec = Recorder(self.path, layers=1)
        train_step(rec, model, ids, mask)
        t, attrs = read_case(self.path, "/step_000000/layer_01")
        self.assertEqual((attrs["dropout_p"], attrs["dropout_replay"]), (0.3, "mask"))
        keep = t["dropout_mask"]
        self.assertEqual((keep.dtype, tuple(keep.shape)), (torch.bool, (2, 4, 12, 12)))
        # Where P > 0 (batch 0 has no padding: its causal triangle) about p of it is dropped.
        seen = torch.ones(12, 12, dtype=torch.bool).tril()
        dropped = 1 - float(keep[0][:, seen].float().mean())
        self.assertGreater(dropped, 0.15)
        self.assertLess(dropped, 0.45)
        self.assertEqual(scan_errors(self.path), [])
        model.eval()
        rec = Recorder(self.path, layers=1)
        train_step(rec, model, ids, mask)
        _, attrs = read_case(self.path, "/step_000000/layer_01")
        self.assertNotIn("dropout_p", attrs)  # eval mode: the function drops nothing

    def test_gemma2_softcap_is_recorded(self):
        torch.manual_seed(0)
        config = transformers.Gemma2Config(
            vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=64, attn_logit_softcapping=2.0, query_pre_attn_scalar=16,
            pad_token_id=0, attn_implementation="eager")
        model = transformers.Gemma2ForCausalLM(config)
        with torch.no_grad():  # scores well past the cap, where soft-capping changes them
            for layer in model.model.layers:
                layer.self_attn.q_proj.weight *= 30
        ids = torch.randint(3, 128, (2, 12), generator=torch.Generator().manual_seed(1))
        rec = Recorder(self.path)
        train_step(rec, model, ids, torch.ones_like(ids))
        t, attrs = read_case(self.path, LAYER)
        self.assertEqual(attrs["softcap"], 2.0)
        self.assertAlmostEqual(attrs["scale"], 16 ** -0.5)
        self.assertEqual(scan_errors(self.path), [])

    def test_unreplayable_arguments_refuse_the_call_with_a_warning(self):
        # A modeling module whose eager function takes attention sinks (as gpt-oss's does).
        name = "transformers.models.sinks_demo.modeling_sinks_demo"
        module = types.ModuleType(name)

        def eager_attention_forward(module, query, key, value, attention_mask, scaling,
                                    dropout=0.0, **kwargs):
            s = query @ key.transpose(2, 3) * scaling
            return (torch.softmax(s, -1) @ value).transpose(1, 2), s

        module.eager_attention_forward = eager_attention_forward
        sys.modules[name] = module
        try:
            rec = Recorder(self.path)
            q = torch.randn(1, 2, 4, 8, requires_grad=True)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with rec.step(0):
                    self.assertIsNot(module.eager_attention_forward, eager_attention_forward)
                    out, _ = module.eager_attention_forward(None, q, q, q, None, 0.5,
                                                            sinks=torch.zeros(2))
                    out.sum().backward()
                rec.close()
            self.assertIs(module.eager_attention_forward, eager_attention_forward)
        finally:
            del sys.modules[name]
        self.assertEqual(rec.written, [])
        messages = [str(c.message) for c in caught]
        self.assertTrue(any("eager_attention_forward is not recorded: sinks changes the scores"
                            in m for m in messages), messages)


if __name__ == "__main__":
    unittest.main()
