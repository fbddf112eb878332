import { keyStatusRoute } from "idempotent-endpoint/next";

import { checkoutEndpoint } from "@/lib/endpoint";

export const { GET, POST } = keyStatusRoute(checkoutEndpoint);
