"""Config tests; a package because tests/protocol has a test_parser.py too."""
