"""``kibitz serve`` without Ray: what a post is, what may get in, what is stored, and how posted
games become instance rows. The Ray Serve deployments that use them are ``actors.serve_app``;
docs/guide/serve.md is the user's page."""
