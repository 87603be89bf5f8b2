"""Pure control-plane cores: decisions and codecs, no socket, no kernel."""
