// The app's own credential store (tests/background): a session token in a database of its own, which
// the page writes at sign-in and the service worker reads to send (the library never stores it).
const open = () =>
  new Promise((resolve, reject) => {
    const request = indexedDB.open("app-session", 1);
    request.onupgradeneeded = () => request.result.createObjectStore("session");
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });

export async function saveToken(token) {
  const db = await open();
  await new Promise((resolve, reject) => {
    const tx = db.transaction("session", "readwrite");
    tx.objectStore("session").put(token, "token");
    tx.oncomplete = resolve;
    tx.onerror = () => reject(tx.error);
  });
  db.close();
}

export async function readToken() {
  const db = await open();
  const token = await new Promise((resolve, reject) => {
    const request = db.transaction("session").objectStore("session").get("token");
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  db.close();
  return token;
}
