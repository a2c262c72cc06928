"""Reading a finished run and measuring it: agreement (QWK) tables, seed 002's consensus metrics, the HTML report,
the error export and the cost report."""
