import type { Metadata } from "next";

export const metadata: Metadata = {
  title: "Checkout",
  description: "A checkout whose orders are placed once per Idempotency-Key",
};

export default function RootLayout({ children }: Readonly<{ children: React.ReactNode }>) {
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  );
}
