"""`python -m service.cli`: the `solr-rag` command."""

import sys

from service.cli import main

sys.exit(main())
