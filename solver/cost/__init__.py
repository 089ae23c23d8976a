"""The cost model: efficiency curves, collectives, data-movement frontiers, option menus and
the configuration-latency rule."""
