"""`lifeline completion SHELL` and `lifeline-mesh completion SHELL`: scripts made from the
installed parsers, loaded into a real bash that completes a command and an option."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _complete(prog: str, words: list[str]) -> list[str]:
    """What bash offers for ``words`` (the last one being typed) after loading the script."""
    function = "_shtab_" + prog.replace("-", "_")
    line = " ".join([prog, *words])
    script = f"""
        eval "$({prog} completion bash)"
        COMP_WORDS=({line}); COMP_CWORD={len(words)}
        COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}
        {function}
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_and_options_of_both_clis() -> None:
    assert _complete("lifeline-mesh", ["ser"]) == ["serve"]
    assert "--listen" in _complete("lifeline-mesh", ["serve", "--li"])
    assert set(_complete("lifeline", ["re"])) >= {"recall", "render", "resume", "recover"}
    assert "--budget" in _complete("lifeline", ["context", "--bu"])


@pytest.mark.parametrize("prog", ["lifeline", "lifeline-mesh"])
def test_every_shell_gets_a_script_and_a_wrong_one_is_refused(prog: str) -> None:
    for shell in ("bash", "zsh", "tcsh"):
        done = subprocess.run(
            [str(BIN / prog), "completion", shell], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and "completion" in done.stdout, done.stderr
    done = subprocess.run(
        [str(BIN / prog), "completion", "fish"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "invalid choice: 'fish'" in done.stderr
