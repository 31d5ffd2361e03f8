// Starts Swagger UI on the service's own OpenAPI document, without the operations tagged
// "examples" (the seed's demonstration routes, which are not part of the users API; the document
// at /openapi.json still describes them). BaseLayout, because the standalone layout injects a
// <style> element that the page's Content-Security-Policy refuses, and shows a badge fetched from
// another origin.
fetch("/openapi.json")
  .then((response) => response.json())
  .then((spec) => {
    for (const [path, item] of Object.entries(spec.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (operation.tags && operation.tags.includes("examples")) delete item[method];
      }
      if (Object.keys(item).length === 0) delete spec.paths[path];
    }
    spec.tags = (spec.tags || []).filter((tag) => tag.name !== "examples");
    SwaggerUIBundle({
      spec,
      dom_id: "#reference",
      layout: "BaseLayout",
      presets: [SwaggerUIBundle.presets.apis],
      deepLinking: true,
      validatorUrl: null,
    });
  });
