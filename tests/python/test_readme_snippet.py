"""The README's "Dump from your training run" section, pasted as is into a small training loop
(an nn.TransformerEncoderLayer whose third batch holds an Inf), then its headless command run
on what it wrote."""
import os
import re
import shlex
import subprocess
import tempfile
import unittest

import h5py
import torch

from attnscope_test_util import CLI

README = os.environ.get("ATTNSCOPE_README", os.path.join(os.path.dirname(__file__), "..", "..",
                                                         "README.md"))


def section_blocks(language):
    with open(README, encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Dump from your training run", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


class ReadmeSnippetTest(unittest.TestCase):
    def test_pasted_snippet_records_the_bad_step_and_the_command_reads_it(self):
        (code,) = section_blocks("python")
        self.assertEqual(len(code.strip().splitlines()), 5)
        (commands,) = section_blocks("sh")
        torch.manual_seed(0)
        model = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32,
                                                 dropout=0.0, batch_first=True)
        loader = [torch.randn(2, 6, 16) for _ in range(4)]
        loader[2][1, 3, 5] = float("inf")
        work = tempfile.TemporaryDirectory()
        cwd = os.getcwd()
        os.chdir(work.name)
        try:
            scope = {"model": model, "loader": loader, "loss_fn": lambda y: y.square().mean()}
            exec(compile(code, "README.md", "exec"), scope)
            rec = scope["rec"]
            self.assertEqual(rec.written, ["/step_000002/layer_00"])
            line = next(c for c in commands.splitlines() if "attnscope-cli" in c)
            argv = shlex.split(line.split("#")[0])
            self.assertEqual(argv[0], "build/app/cli/attnscope-cli")
            run = subprocess.run([CLI, *argv[1:], "--json"], capture_output=True, text=True,
                                 timeout=300)
            self.assertEqual(run.returncode, 1, run.stderr)
            self.assertIn('"nonfinite_input"', run.stdout)
            self.assertIn('"path": "/step_000002/layer_00"', run.stdout)
            gui = next(c for c in commands.splitlines() if "# GUI" in c)
            self.assertEqual(shlex.split(gui.split("#")[0]), ["build/app/attnscope",
                                                              "attn_dump.h5"])
            with h5py.File("attn_dump.h5", "r") as f:
                self.assertEqual(f["/step_000002/layer_00"].attrs["name"], "self_attn")
        finally:
            os.chdir(cwd)
            work.cleanup()


if __name__ == "__main__":
    unittest.main()
