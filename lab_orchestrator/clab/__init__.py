"""The containerlab backend: the export, the backend and the node agent inside a container."""
