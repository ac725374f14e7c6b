"""`python -m moviemem.cli`."""

from . import main

main()
