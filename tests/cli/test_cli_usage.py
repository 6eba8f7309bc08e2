"""attnscope-cli command line: --help of every command and of the program (exit 0), an unknown
command or option (exit 2)."""
import unittest

from cli_support import SAMPLE, CliTestCase


class CliUsageTest(CliTestCase):
    def check_help(self, command):
        self.assertInStdout(self.cli(command, "--help", exit=0), "usage: attnscope-cli")

    def test_cli_help_info_exit_0(self):
        self.check_help("info")

    def test_cli_help_scan_exit_0(self):
        self.check_help("scan")

    def test_cli_help_compare_exit_0(self):
        self.check_help("compare")

    def test_cli_help_matrix_exit_0(self):
        self.check_help("matrix")

    def test_cli_help_sweep_exit_0(self):
        self.check_help("sweep")

    def test_cli_help_run_exit_0(self):
        self.check_help("run")

    def test_cli_help_step_exit_0(self):
        self.check_help("step")

    def test_cli_help_top_level_lists_commands(self):
        self.assertInStdout(self.cli("--help", exit=0), "compare FILE::CASE", "step FILE::CASE")

    def test_cli_bad_usage_exit_2(self):
        self.assertInStderr(self.cli("frobnicate", SAMPLE, exit=2), "unknown command")

    def test_cli_unknown_option_exit_2(self):
        self.assertInStderr(self.cli("info", "--bogus", SAMPLE, exit=2), "unknown option '--bogus'")


if __name__ == "__main__":
    unittest.main()
