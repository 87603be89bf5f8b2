"""One planning phase per feature (MNHA, SRD, the MX selector, FlexVPN): a daemon's config."""
