"""The loop report's parts (see ``loop_report``)."""
