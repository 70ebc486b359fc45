"""attnio's reports: papermill notebook templates (beside this file) and the page code they
call (``reports.pages``). Reports read files under results/; they never run a kernel."""
