import sys

from pynatsd.cli import main

sys.exit(main())
