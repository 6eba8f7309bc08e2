"""The CPU kernels' instruction sets (kernels/cpu/cpu_isa.h) seen from attnscope-cli: the bundled
sample scanned with ATTNSCOPE_CPU_ISA forced to each set this CPU has gives the findings of the
best set (kind, severity, tensor, where, how many, under which modes) and the same first bad
case, and so does the scan on emulated CPUs (qemu-x86_64 -cpu MODEL,
tests/emulated_cpu_tests.cmake) without AVX-512 or without SSE4, where the CLI picks its set from
that CPU's offer; an unknown set is named on stderr with the sets available, and the scan still
runs."""
import os

from cli_support import SAMPLE, CliTestCase

SETS = ("avx512bf16", "avx512", "avx2", "sse4", "sse2")
QEMU = os.environ["ATTNSCOPE_QEMU_X86_64"]


def findings_of(doc):
    """Per case, what each finding says apart from its measured numbers."""
    return {c["path"]: sorted((f["kind"], f["severity"], f["tensor"], str(f["batch"]),
                               str(f["head"]), str(f["rows"]), str(f["cols"]), f["count"],
                               ",".join(f["modes"]))
                              for f in c["findings"]) for c in doc["cases"]}


class CpuIsa(CliTestCase):
    def test_cli_scan_same_findings_under_every_cpu_isa(self):
        best = self.cli_json("scan", SAMPLE, "--json", exit=1)
        ran = []
        for isa in SETS:
            run = self.cli("scan", SAMPLE, "--json", exit=1, env={"ATTNSCOPE_CPU_ISA": isa})
            if "ignored" in run.stderr:  # this CPU lacks the set
                self.assertIn("this CPU cannot run the instruction set '%s'" % isa, run.stderr)
                continue
            ran.append(isa)
            doc = self.json_of(run)
            with self.subTest(isa=isa):
                self.assertEqual(findings_of(doc), findings_of(best))
                self.assertEqual(doc["first_bad"]["path"], best["first_bad"]["path"])
                self.assertEqual(doc["first_bad"]["kinds"], best["first_bad"]["kinds"])
        self.assertIn("sse2", ran)  # the portable set runs on every x86-64 CPU

    def scan_on_emulated_cpu(self, model, sets):
        """The sample's fp16 score overflow and padding cases (score overflow, mask fill, fully
        masked rows, both kernel modes; the whole sample takes qemu 4 to 15 minutes, depending
        on the host) scanned under qemu-x86_64 -cpu MODEL, which offers `sets` (best first)."""
        cases = ("--case", "/[fp]*")
        best = self.cli_json("scan", SAMPLE, "--json", *cases, exit=1)
        self.assertEqual(len(best["cases"]), 2)
        # Asking for the best set of all is refused there, naming what the model offers.
        run = self.cli("scan", SAMPLE, "--json", *cases, exit=1, timeout=1200,
                       env={"ATTNSCOPE_CPU_ISA": "avx512bf16"}, under=(QEMU, "-cpu", model))
        self.assertInStderr(run, "this CPU cannot run the instruction set 'avx512bf16'; "
                                 "available here: %s; running %s" % (sets, sets.split(",")[0]))
        doc = self.json_of(run)
        self.assertEqual(findings_of(doc), findings_of(best))
        self.assertEqual(doc["first_bad"]["path"], best["first_bad"]["path"])
        self.assertEqual(doc["first_bad"]["kinds"], best["first_bad"]["kinds"])

    def test_cli_scan_same_findings_on_emulated_haswell(self):
        self.scan_on_emulated_cpu("Haswell-noTSX-IBRS", "avx2, sse4, sse2")  # Intel, AVX2

    def test_cli_scan_same_findings_on_emulated_conroe(self):
        self.scan_on_emulated_cpu("Conroe", "sse2")  # Core 2: SSSE3, no SSE4

    def test_cli_unknown_cpu_isa_is_named_and_the_scan_runs(self):
        run = self.cli("scan", SAMPLE, "--json", exit=1, env={"ATTNSCOPE_CPU_ISA": "avx1024"})
        self.assertInStderr(run, "ATTNSCOPE_CPU_ISA=avx1024 ignored: unknown instruction set "
                                 "'avx1024'", "available here: ", "sse2; running ")
        self.assertEqual(len(self.json_of(run)["cases"]), 37)
