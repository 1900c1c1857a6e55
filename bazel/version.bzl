"""The torch-xxnpu release version: the wheel's name and torch_xxnpu.__version__ come from here."""
XXNPU_VERSION = "0.1.0"
