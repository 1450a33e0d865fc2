% PAGERANK20  Twenty steps of damped power iteration (thin iterate).
function r = pagerank20(M, r0, d)
  %#linview dims M(n,n) r0(n,1)
  %#linview scalar d
  %#linview dynamic M
  n = size(M, 1);
  r = r0;
  for i = 1:20
    r = d * M * r + (1 - d) / n * ones(n, 1);
  end
end
