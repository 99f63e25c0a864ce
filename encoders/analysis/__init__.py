"""Looking inside a trained model (paper section V-A): gate traces, keywords and topics (``traces``),
their pictures (``plots``), and the HTML report of ``deepsent analyze`` (``report``)."""
