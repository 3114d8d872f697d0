import sys

from rankcollapse.cli.main import main

sys.exit(main())
