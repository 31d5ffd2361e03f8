// Starts Swagger UI on the service's own OpenAPI document. BaseLayout, because the standalone
// layout injects a <style> element that the page's Content-Security-Policy refuses, and shows a
// badge fetched from another origin.
SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#reference",
  layout: "BaseLayout",
  presets: [SwaggerUIBundle.presets.apis],
  deepLinking: true,
  validatorUrl: null,
});
