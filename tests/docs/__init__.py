"""Helpers of the docs tests: the code blocks of README.md and docs/*.md, the fixtures the
examples name, and the runner that executes one page's examples as a reader would."""
