function x = cg_steps(A, b)
  % three conjugate-gradient steps on A x = b
  % test inputs: A=spd(6) b=randn(6,1)
  x = zeros(rows(A), 1);
  r = b - A * x;
  p = r;
  rs = r' * r;
  for k = 1:3
    Ap = A * p;
    alpha = rs / (p' * Ap);
    x += alpha * p;
    r -= alpha * Ap;
    rsnew = r' * r;
    p = r + (rsnew / rs) * p;
    rs = rsnew;
  end
end
