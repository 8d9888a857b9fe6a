import sys

from proofs_check.cli import main

sys.exit(main())
