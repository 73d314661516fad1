import sys

from worker._main import main

sys.exit(main())
