import sys

from hadar.cli import main

sys.exit(main())
