"""Whether this machine can run moviemem: tools, offline weights, the instruction sets the CPU really
runs, the llama.cpp build (loaded in a child process), disk and library, each failure with its fix."""

from .checks import CHECKS, Check, failures, run_checks

__all__ = ["CHECKS", "Check", "failures", "run_checks"]
