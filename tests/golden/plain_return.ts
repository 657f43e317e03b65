const doubled = [1, 2, 3].map((n) => n * 2);
return { answer: 6 * 7, doubled };
