"""What the command line says about itself: its version and what it is for."""

from importlib.metadata import version

from tests.conftest import run_reme


def test_version_is_the_installed_package_version(tmp_path):
    proc = run_reme(["--version"], tmp_path, check=True)
    assert proc.stdout.strip() == f"reme {version('reme-harness')}"


def test_help_describes_both_benchmarks_and_the_methods_without_type_marks_on_flags(tmp_path):
    text = run_reme(["--help"], tmp_path, check=True).stdout
    for word in ("BFCL-v3", "AppWorld", "ReMe", "A-Mem", "LangMem", "ACE", "Dynamic Cheatsheet", "ReasoningBank",
                 "--version"):
        assert word in " ".join(text.split()), word
    # Flags take no value; no "<bool>" beside them, in any command's help.
    for command in ([], ["eval"], ["ablate"], ["pool", "show"], ["appworld", "setup"]):
        out = run_reme([*command, "--help"], tmp_path, check=True).stdout
        assert "--help" in out and "<bool>" not in out, command
