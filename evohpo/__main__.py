import sys

from evohpo.cli import main

sys.exit(main())
