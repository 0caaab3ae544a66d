import sys

from kvsched.cli import main

sys.exit(main())
