"""HTTP: validate requests, call the workspace and analyses, encode JSON. Routes never compute."""
