"""The pages the service serves: the admin page and the chat widget (plain HTML, CSS and JS,
no build step). Templates are rendered with jinja2's autoescaping; the scripts build the DOM
with textContent only, so no answer or document text is ever parsed as HTML."""
