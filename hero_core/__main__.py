import sys

from hero_core.cli.main import main

sys.exit(main())
